import threading, time
threads = []
for i in range(50):
    t = threading.Thread(target=time.sleep, args=(2,))
    t.start()
    threads.append(t)
