from gates.fastpath import main

main()
