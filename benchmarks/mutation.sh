#!/usr/bin/env bash
# Mutation testing (mutmut 3) of the modules that dedup, the oracles, input synthesis, the ONNX
# export and the campaign store rest on.  What is mutated and which tests run is set in
# pyproject.toml ([tool.mutmut]): fast unit tests only, no campaigns on real compilers.
#
#   benchmarks/mutation.sh            # all six modules (~15-25 min on 2 cores)
#   benchmarks/mutation.sh 'dlcfuzz.values.*'   # one module (mutmut's mutant-name globs)
#
# Prints one line per module: killed (incl. timeouts) / mutants, and the surviving mutants'
# names (inspect one with `python -m mutmut show NAME`).  "no tests" mutants (code no selected
# test reaches) count as survivors.
#
# The "before" figures of issue 17 come from this script run on commit 000bb19 with this
# [tool.mutmut] section copied in and the test files that did not exist yet (test_dedup,
# test_compare, test_store, test_export_onnx) left out of the selection.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf mutants  # mutmut caches results there: start clean so the figures are this tree's
# mutmut puts mutants/src first on sys.path; the editable install must not shadow it
unset PYTHONPATH
python -m mutmut run --max-children "${MUTATION_JOBS:-2}" "$@" > mutants.log 2>&1 || { tail -30 mutants.log; exit 1; }
python -m mutmut results --all true | python -c '
import collections, sys
counts = collections.defaultdict(collections.Counter)
left = collections.defaultdict(list)
for line in sys.stdin:
    name, _, status = line.strip().rpartition(": ")
    if not name or status == "not checked":
        continue
    module = name.split(".x")[0].split(".x\u01c1")[0]
    module = module.rsplit(".", 1)[0] if "__mutmut_" in module.rsplit(".", 1)[-1] else module
    counts[module][status] += 1
    if status not in ("killed", "timeout"):
        left[module].append(f"{name} ({status})")
for module, c in sorted(counts.items()):
    total = sum(c.values())
    dead = c["killed"] + c["timeout"]
    print(f"{module}: {dead}/{total} killed ({100 * dead / total:.1f}%)")
    for n in left[module]:
        print("    " + n)
'
