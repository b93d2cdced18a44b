echo start
eval "if true"
