echo "data" > /dev/full
