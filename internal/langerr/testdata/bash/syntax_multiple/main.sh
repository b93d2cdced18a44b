echo a )
fi
