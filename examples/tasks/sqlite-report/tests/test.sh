#!/bin/bash
# This task writes a CTRF report (see conftest.py), to exercise that path.
cd /tests
python3 -m pytest -p no:cacheprovider test_outputs.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
