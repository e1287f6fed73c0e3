"""Python study workload: the standard library's dbm.dumb key-value store (via the
module's own API, as an application would use it): create, insert, sync, update in place,
add, close, reopen, grow a value (moves it), delete, close. Prints after each step that a
user would consider finished."""
import dbm.dumb


def val(key, gen, n=300):
    return (f"{key}:{gen}:" * 300)[:n].encode()


db = dbm.dumb.open("store", "c")
for i in range(3):
    db[f"k{i}"] = val(f"k{i}", 1)
db.sync()
print("synced 1", flush=True)
db["k1"] = val("k1", 2)  # same size: overwritten in place
db["k3"] = val("k3", 1)  # a new key: appended
db.close()
print("closed 1", flush=True)
db = dbm.dumb.open("store", "w")
db["k0"] = val("k0", 3, 700)  # larger: a new block at the end
del db["k2"]
db.close()
print("closed 2", flush=True)
