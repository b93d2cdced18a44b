cd /tmp
echo done
