def hello():
    print "hello"
