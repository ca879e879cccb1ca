//! `memd category`: the standing rules injected at every session start
//! (`list`, `get`, `set`), through the same use case as `POST
//! /v1/categories` (through the running daemon if there is one).

use serde_json::Value;

use super::daemon::Target;
use crate::api::{CategoriesBody, CategoryAction};

/// Arguments of `memd category`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    action: Action,
}

/// `memd category` actions.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Action {
    /// Every category with its slot and a preview.
    List,
    /// One category in full.
    Get {
        /// Its name, e.g. coding-standards.
        name: String,
    },
    /// Create or replace a category.
    Set {
        /// Its name: lowercase letters, digits and `-`.
        name: String,
        /// Its Markdown content (`-` reads it from stdin).
        content: String,
        /// company-values, architecture, coding-requirements or custom.
        #[arg(long, default_value = "custom")]
        slot: String,
        /// The scene it lives in (default main).
        #[arg(long)]
        scene: Option<String>,
    },
}

impl Args {
    /// `set` writes; `list` and `get` only read.
    pub(super) fn mode(&self) -> crate::hub::Mode {
        match self.action {
            Action::Set { .. } => crate::hub::Mode::Write,
            _ => crate::hub::Mode::ReadPreferWrite,
        }
    }
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = match &args.action {
        Action::List => body(CategoryAction::List, None),
        Action::Get { name } => body(CategoryAction::Get, Some(name)),
        Action::Set {
            name,
            content,
            slot,
            scene,
        } => {
            let content = if content == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                content.clone()
            };
            CategoriesBody {
                slot: Some(slot.clone()),
                content: Some(content),
                scene: scene.clone(),
                ..body(CategoryAction::Set, Some(name))
            }
        }
    };
    let reply: Value = target.call("/v1/categories", body, |hub, c, body| {
        let reply = hub.categories(c, body)?;
        serde_json::to_value(reply).map_err(|e| crate::Error::Internal(e.to_string()))
    })?;
    if cli.json {
        return super::print_json(&reply);
    }
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    if let Some(list) = reply["categories"].as_array() {
        if list.is_empty() {
            outln!("no categories");
        }
        for c in list {
            outln!(
                "{}  [{}] ({})  {}",
                text(c, "name"),
                text(c, "slot"),
                text(c, "scene"),
                crate::hub::one_line(&text(c, "preview"), 60)
            );
        }
        return Ok(());
    }
    outln!("name:     {}", text(&reply, "name"));
    outln!("slot:     {}", text(&reply, "slot"));
    outln!("scene:    {}", text(&reply, "scene"));
    outln!("updated:  {}", text(&reply, "updated_at"));
    outln!("\n{}", text(&reply, "content").trim_end());
    Ok(())
}

fn body(action: CategoryAction, name: Option<&String>) -> CategoriesBody {
    CategoriesBody {
        action,
        name: name.cloned(),
        slot: None,
        content: None,
        scene: None,
    }
}
