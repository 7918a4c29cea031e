"""The SageMaker SDK's import in fmlab's processes: without rfc3987_syntax's 38 lark grammars (fmlab/__init__.py).

Run: .venv/bin/pytest tests/jobs/test_sdk_import.py -q   (about 3 s: a fresh interpreter)
"""

import subprocess
import sys


def test_a_process_that_imports_fmlab_then_the_sdk_compiles_no_lark_grammar_and_jsonschema_still_validates():
    code = ("import sys, fmlab, jsonschema, sagemaker.core\n"
            "jsonschema.validate({'a': 1}, {'type': 'object', 'properties': {'a': {'type': 'integer'}}})\n"
            "try:\n"
            "    jsonschema.validate({'a': 'x'}, {'properties': {'a': {'type': 'integer'}}})\n"
            "    print('accepted a bad instance')\n"
            "except jsonschema.ValidationError:\n"
            "    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lark', 'rfc3987_syntax') and sys.modules[m]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
