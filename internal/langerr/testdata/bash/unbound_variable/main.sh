set -u
echo "start"
echo "value: $MISSING_VAR"
