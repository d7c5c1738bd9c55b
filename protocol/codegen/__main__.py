from protocol.codegen.generate import main

main()
