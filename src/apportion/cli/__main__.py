from apportion.cli.main import main

main()
