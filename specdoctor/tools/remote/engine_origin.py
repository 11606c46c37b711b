import importlib.util, json, os, sys
p = os.environ.pop('SD_PKG')
s = importlib.util.find_spec(p)
try:
    import importlib.metadata as md
    u = json.loads(md.distribution(p).read_text('direct_url.json') or 'null')
except Exception:
    u = None
e = u.get('url') if isinstance(u, dict) and (u.get('dir_info') or {}).get('editable') else None
print(json.dumps({'origin': s and s.origin, 'locations': list(s.submodule_search_locations or []) if s else [], 'executable': sys.executable, 'cwd': os.getcwd(), 'editable': e}))
