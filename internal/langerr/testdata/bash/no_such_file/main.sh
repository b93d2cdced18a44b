echo start
/nope/tool --flag
