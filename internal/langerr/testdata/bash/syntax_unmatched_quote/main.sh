echo start
echo "unterminated
echo end
