from gates.cli.app import main

main()
