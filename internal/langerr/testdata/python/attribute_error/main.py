class Point:
    def __init__(self):
        self.x = 1

p = Point()
print(p.y)
