"""The plan floor: pure-Python decisions about how kernels run, read by the passes
(memory planning, layout) and by the emitters alike, so that neither imports the
other. Plain Python and numpy only: importing it does not import llvmlite.

The CPU's plans are this folder's modules, one per kernel family, with the registry
of planners in planners.py; the GPU's are in gpu/. memory.py holds the memory plan's
records (Place, MemoryPlan), which memory planning fills and the module builders read."""
