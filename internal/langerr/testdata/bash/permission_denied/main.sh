printf 'echo hi\n' > ./tool.sh
./tool.sh
