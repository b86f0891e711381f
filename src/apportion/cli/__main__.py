from apportion.cli.main import app

app(prog_name="apportion")
