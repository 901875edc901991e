from gates.entry import main

main()
