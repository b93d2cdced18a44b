name=world
echo "hello"
echo "${name!}"
