from gates.cli import main

main()
