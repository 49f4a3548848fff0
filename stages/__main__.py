"""`python -m torchgate <tool>`: the `torchgate` command, where its script is not on PATH."""
from torchgate.torchgate import main

main()
