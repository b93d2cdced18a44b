head -c 100000 /dev/zero > big.bin
