"""The plan floor: pure-Python decisions about how kernels run, read by the passes
(memory planning, layout) and by the emitters alike, so that neither imports the
other. Plain Python and numpy only: importing it does not import llvmlite."""
