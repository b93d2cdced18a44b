def total(rows):
    out = 0
    for r in rows:
        out += r["price"] * r["qty"]
    return out

print(total([{"price": 2}]))
