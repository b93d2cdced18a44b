declare -A m
m[]=1
