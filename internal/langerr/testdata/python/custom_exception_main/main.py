class QuotaError(Exception):
    pass

raise QuotaError("quota exceeded: 3 > 2")
