"""Image env vars: the release's (``CUDA_VERSION``, ``NVIDIA_REQUIRE_CUDA`` -> ``require-cuda``
and ``driver-branches``; the release row's ``env_*`` fields) and the products' declared
versions (each row's ``env``: ``NV_CUDNN_VERSION``, ``NV_LIBNCCL_PACKAGE``, ...), recorded
on the release component (``env-declared``) and compared with what is installed
(``disagreement``); the release version is checked against the runtime row's (major.minor)."""

from __future__ import annotations

import re

from ...catalog import detection
from ...model import EvidenceMethod
from .._gpu import Observations, major_minor, parse_require_cuda
from ..base import VIEW_ERRORS, CollectContext
from . import P_ENV

__all__ = ["collect", "declared_version"]


def declared_version(value: str) -> str:
    """``libnccl2=2.28.3-1+cuda13.0`` -> ``2.28.3``; ``12.4.127-1`` -> ``12.4.127``."""
    v = value.split("=", 1)[1] if "=" in value else value
    return re.split(r"[-+~]", v, maxsplit=1)[0]


def collect(ctx: CollectContext, obs: Observations, roots: list[str]) -> None:
    rel = detection.release(obs.stack)
    if rel is None or rel.env_release is None:
        return
    env = ctx.target.env or {}
    release_var = rel.env_release
    cuda_version = env.get(release_var, "").strip()
    require = env.get(rel.env_require, "").strip() if rel.env_require else ""
    declared = [(var, f.product, env[var].strip())
                for f in detection.found(obs.stack) for var in f.env if env.get(var)]
    if not (cuda_version or require or declared or any(env.get(v) for v in rel.env_noted[:1])):
        return
    # the release the env describes: where the root link points, else the only root,
    # else the root of the same major.minor
    target: str | None = None
    try:
        link = ctx.fs.realpath(rel.root)
    except VIEW_ERRORS:  # the root link loops: no root is the linked one
        link = ""
    if link in roots:
        target = link
    elif len(roots) == 1:
        target = roots[0]
    else:
        mm = major_minor(cuda_version)
        target = next((r for r in roots if mm and r.endswith("-" + mm)), None)
    loc = target or ""
    if not cuda_version and obs.get(rel.product, loc) is None:
        return  # declarations without the release var or a root: nothing to hang them on
    tk = obs.add(rel.product, loc)
    if cuda_version:
        obs.add(rel.product, loc,
                ctx.evidence(EvidenceMethod.ENV.value, None, f"{release_var}={cuda_version}"),
                version=cuda_version, priority=P_ENV, source=f"env {release_var}")
    for var in rel.env_noted:
        if env.get(var):
            tk.evidence.append(ctx.evidence(EvidenceMethod.ENV.value, None, f"{var}={env[var]}"))
    if require and rel.env_require:
        rq = parse_require_cuda(require)
        tk.evidence.append(
            ctx.evidence(EvidenceMethod.ENV.value, None, f"{rel.env_require}={require}"))
        if rq.cuda:
            tk.properties["require-cuda"] = rq.cuda
        if rq.branches:
            tk.properties["driver-branches"] = rq.branches_text
    notes: list[str] = []
    decl_text: list[str] = []
    done: set[str] = set()
    for var, product, value in declared:
        if product in done:
            continue
        done.add(product)
        tk.evidence.append(ctx.evidence(EvidenceMethod.ENV.value, None, f"{var}={value}"))
        want = declared_version(value)
        decl_text.append(f"{product} {want}")
        found = [v for o in obs.items() if o.name == product if (v := obs.chosen_version(o))]
        if found and not any(
            f == want or f.startswith(want + ".") or want.startswith(f + ".") for f in found
        ):
            notes.append(f"{var}={value} but {product} " + " + ".join(sorted(set(found))))
    if decl_text:
        tk.properties["env-declared"] = ", ".join(decl_text)
    runtime = detection.with_role(obs.stack, "runtime")
    if cuda_version and runtime is not None:
        mm = major_minor(cuda_version)
        rts = [o for o in obs.items() if o.name == runtime.product and obs.chosen_version(o)]
        here = [o for o in rts if o.location == loc and loc]
        system = [o for o in rts if "-packages/" not in o.location]
        pool = here or system or rts
        versions = sorted({obs.chosen_version(o) or "" for o in pool})
        if pool and mm and not any(major_minor(v) == mm for v in versions):
            notes.insert(0, f"{release_var}={cuda_version} but {runtime.product} "
                            + " + ".join(versions))
    if notes:
        tk.properties["disagreement"] = "; ".join(notes)
