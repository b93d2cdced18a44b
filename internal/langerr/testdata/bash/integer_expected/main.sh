n="abc"
if [ "$n" -gt 3 ]; then echo big; fi
