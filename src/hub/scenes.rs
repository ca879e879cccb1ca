//! Use case: the scenes a caller may use (`GET /v1/scenes`, the MCP tool
//! `memory_scenes`): its own scenes, `shared`, and with `*` every scene
//! holding a memory it may read; for each whether it may read and write
//! there, and how many memories it can read there. The counts are taken
//! under the caller's read filter (its scenes and privacy scopes, inside the
//! query), so they say nothing about memories it may not read.

use std::collections::BTreeMap;

use super::caller::SHARED_SCENE;
use super::{Caller, Hub};
use crate::api::{SceneUse, ScenesReply};
use crate::auth::scope;
use crate::error::Result;
use crate::model::Scene;

impl Hub {
    /// The scenes `caller` may use, with what it may do and see in each.
    pub fn scenes(&self, caller: &Caller) -> Result<ScenesReply> {
        let reads = caller.has(scope::READ);
        let counts = if reads {
            let filter = caller.read_filter(None, false)?;
            self.core.index.meta.scene_counts(&filter)?
        } else {
            Default::default()
        };
        let mut scenes: BTreeMap<Scene, SceneUse> = BTreeMap::new();
        let mut add = |scene: &Scene| {
            scenes.entry(scene.clone()).or_insert_with(|| SceneUse {
                scene: scene.clone(),
                read: reads,
                write: caller.has(scope::WRITE) && caller.may_write_in(scene),
                memories: counts.get(scene.as_str()).copied().unwrap_or(0),
            });
        };
        caller.scenes().iter().for_each(&mut add);
        caller.write_scenes().iter().for_each(&mut add);
        add(&Scene::parse(SHARED_SCENE)?);
        for name in counts.keys() {
            // Only a `*` token's filter admits scenes beyond its own and shared.
            if let Ok(scene) = Scene::parse(name) {
                add(&scene);
            }
        }
        Ok(ScenesReply {
            scenes: scenes.into_values().collect(),
            reads_every_scene: caller.has(scope::ALL),
        })
    }
}
