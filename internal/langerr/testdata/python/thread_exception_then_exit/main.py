import threading, sys
def work():
    raise ValueError("in thread")
t = threading.Thread(target=work)
t.start(); t.join()
sys.exit(1)
