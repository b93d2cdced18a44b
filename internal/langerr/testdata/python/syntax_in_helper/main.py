import os
import helper
print(helper.f())
