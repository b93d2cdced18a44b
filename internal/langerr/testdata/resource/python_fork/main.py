import os
children = []
for i in range(50):
    pid = os.fork()
    if pid == 0:
        import time; time.sleep(2); os._exit(0)
    children.append(pid)
