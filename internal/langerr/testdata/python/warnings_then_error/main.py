import warnings
warnings.warn("this is deprecated", DeprecationWarning, stacklevel=1)
warnings.warn("careful")
import sys
print("Traceback (most recent call last): fake line", file=sys.stderr)
[][1]
