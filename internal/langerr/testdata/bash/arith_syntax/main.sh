x=
echo $(( 1 + x + ))
