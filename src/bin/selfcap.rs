//! `selfcap`: the command-line client (see issue 5). Native only.

fn main() {
    eprintln!("selfcap: not implemented yet");
    std::process::exit(2);
}
