first_missing_cmd
echo "middle"
second_missing_cmd
