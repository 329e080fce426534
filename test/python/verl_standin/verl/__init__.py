"""TEST STAND-IN for the verl package (volcengine/verl b178a3cd). As verl/__init__.py:38-41 does,
importing it imports every module VERL_USE_EXTERNAL_MODULES names (comma-separated), after
DataProto is defined and before any trainer module: that is how termgrade's estimator registers and
its validation metrics are put in place."""
import importlib
import os

from .protocol import DataProto  # noqa: F401

for _name in filter(None, os.getenv("VERL_USE_EXTERNAL_MODULES", "").split(",")):
    importlib.import_module(_name)

