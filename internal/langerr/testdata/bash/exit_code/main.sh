echo "bye"
exit 3
