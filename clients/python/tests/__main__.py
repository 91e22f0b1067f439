"""python3 -m tests: every test, one line each ("ok - ...", "not ok - ...",
"skip - ..."), the failure's traceback after it as "# " lines; exits 1 if a
test failed.  (python3 -m unittest discover -s tests -t . runs the same.)"""
from __future__ import annotations

import faulthandler
import signal
import sys
import unittest
from pathlib import Path
from typing import Any, Optional


class Lines(unittest.TestResult):
    def _line(self, status: str, test: Any, detail: Optional[str] = None) -> None:
        print(f"{status} - {test.id().removeprefix('tests.')}", flush=True)
        for line in (detail or "").rstrip().splitlines():
            print(f"# {line}", flush=True)

    def addSuccess(self, test: Any) -> None:
        super().addSuccess(test)
        self._line("ok", test)

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._line("not ok", test, self.failures[-1][1])

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        self._line("not ok", test, self.errors[-1][1])

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        self._line("skip", test, reason)

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._line("not ok", subtest, self._exc_info_to_string(err, test))


def main() -> int:
    # kill -USR1 shows where a test hangs
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    root = Path(__file__).resolve().parent.parent
    suite = unittest.defaultTestLoader.discover(str(root / "tests"), top_level_dir=str(root))
    result = Lines()
    suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
