#!/usr/bin/env python3
"""Real-data check: run the CSAF importer over a git copy of NVIDIA/product-security (path inside; not committed data)."""
import json, subprocess, sys, collections
from gpusbom.advisories.importers.csaf import import_csaf, phrase_class
repo = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "/work/.mirror/NVIDIA+product-security/repo"
files = subprocess.run(["git","-C",repo,"ls-tree","-r","--name-only","HEAD"],capture_output=True,text=True).stdout.split()
docs = [f for f in files if f.endswith(".json") and f.split("/")[-1].split(".")[0].isdigit()]
nd=0; ph=0; ok=0; bad=collections.Counter(); ex={}; errors=[]; unm=collections.Counter(); archs=collections.Counter(); cves=collections.Counter()
for f in docs:
    txt = subprocess.run(["git","-C",repo,"show","HEAD:"+f],capture_output=True,text=True).stdout
    try:
        d=json.loads(txt)
    except Exception as e:
        errors.append((f,str(e))); continue
    if "document" not in d: continue
    nd+=1
    imp=import_csaf(d)
    ph+=imp.phrases; ok+=imp.parsed
    for pid,t in imp.unparsed:
        c=phrase_class(t); bad[c]+=1; ex.setdefault(c,(f,t))
    for u in imp.unmapped: unm[u]+=1
    for p in imp.products.values():
        if p.architecture: archs[p.architecture]+=1
print("docs",len(docs),"csaf",nd,"phrases",ph,"parsed",ok,"errors",errors[:5])
print("UNPARSED classes",len(bad))
for c,n in bad.most_common(): print(n, repr(c), ex[c])
if "--details" in sys.argv:
  print("UNMAPPED"); [print(n,u) for u,n in unm.most_common(60)]
  print("ARCH"); [print(n,a) for a,n in archs.most_common(80)]
