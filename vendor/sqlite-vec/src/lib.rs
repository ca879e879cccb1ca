#[link(name = "sqlite_vec0")]
extern "C" {
    pub fn sqlite3_vec_init();
}
