missing_tool_abc
cat <<END
text
