echo start
pyhton3 --version
echo done
