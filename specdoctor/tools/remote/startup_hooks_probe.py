
import importlib.util, json, os, site, sys
out = []
def stage(where, fn):
    before = dict(os.environ)
    try:
        fn()
    except BaseException as exc:
        out.append({"source": where, "error": type(exc).__name__ + ": " + str(exc)[:120]})
    after = dict(os.environ)
    for k in sorted(set(before) | set(after)):
        if before.get(k) != after.get(k):
            out.append({"source": where, "name": k, "value": after.get(k)})
known = site.removeduppaths()
if hasattr(site, "venv"):  # reads pyvenv.cfg and sets PREFIXES; its own addsitepackages call is replayed below
    real, site.addsitepackages = site.addsitepackages, lambda known_paths, prefixes=None: known_paths
    try:
        known = site.venv(known)
    finally:
        site.addsitepackages = real
if site.ENABLE_USER_SITE is None:
    site.ENABLE_USER_SITE = site.check_enableusersite()
dirs = ([site.getusersitepackages()] if site.ENABLE_USER_SITE else []) + list(site.getsitepackages())
for d in dirs:
    if not os.path.isdir(d):
        continue
    if os.path.normcase(d) not in known:
        sys.path.append(d)
        known.add(os.path.normcase(d))
    for name in sorted(n for n in os.listdir(d) if n.endswith(".pth") and not n.startswith(".")):
        stage(os.path.join(d, name), lambda d=d, name=name: site.addpackage(d, name, known))
for mod in ("sitecustomize", "usercustomize"):
    if mod == "usercustomize" and not site.ENABLE_USER_SITE:
        continue
    spec = importlib.util.find_spec(mod)
    if spec is not None and spec.origin:
        stage(spec.origin, lambda mod=mod: __import__(mod))
print("@@hooks-json " + json.dumps(out))
