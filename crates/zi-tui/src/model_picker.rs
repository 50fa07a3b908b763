//! `/model` and `/thinking` (docs/interactive.md#commands): with an argument they select at
//! once; without one (or with one that names nothing) they open the picker — the catalog with
//! the configured models first and each one's state, or the model's thinking levels — with the
//! current choice selected.

use zi_protocol::request::SettingsScope;
use zi_protocol::state::{CatalogModel, ModelState};
use zi_protocol::thinking::ThinkingLevel;

use crate::app::App;
use crate::picker::{Entry, OpenPicker, Picker, Purpose};
use crate::transcript::Item;

/// What a model's row says about its credentials.
const CONFIGURED: &str = "configured";
const NOT_CONFIGURED: &str = "not configured — no key";
/// A subscription's model without its sign-in.
const NOT_SIGNED_IN: &str = "not signed in — /login";

/// The model picker over `models` (catalog order), configured ones first, `current` selected.
pub fn model_picker(models: &[CatalogModel], current: Option<(&str, &str)>) -> OpenPicker {
    let mut order: Vec<&CatalogModel> = models.iter().collect();
    // Stable: the catalog's order within each group.
    order.sort_by_key(|m| !m.configured);
    let mut refs = Vec::with_capacity(order.len());
    let mut selected = None;
    let entries = order
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let model = &entry.model;
            let reference = format!("{}/{}", model.provider, model.id);
            let is_current = current == Some((model.provider.as_str(), model.id.as_str()));
            if is_current {
                selected = Some(index);
            }
            let mut facts = vec![];
            if model.name != model.id {
                facts.push(model.name.clone());
            }
            facts.push(
                if entry.configured {
                    CONFIGURED
                } else if zi_ai::auth::subscription(&model.provider).is_some() {
                    NOT_SIGNED_IN
                } else {
                    NOT_CONFIGURED
                }
                .to_string(),
            );
            if is_current {
                facts.push("current".to_string());
            }
            refs.push((model.provider.clone(), model.id.clone()));
            Entry {
                search: model.name.clone(),
                muted: !entry.configured,
                ..Entry::new(reference, facts.join(" · "))
            }
        })
        .collect();
    let picker = Picker::new("Select a model", "no model matches", entries);
    OpenPicker {
        picker: match selected {
            Some(index) => picker.select(index),
            None => picker,
        },
        purpose: Purpose::Model(refs),
    }
}

/// The thinking picker over `levels`, `current` selected.
pub fn thinking_picker(levels: &[ThinkingLevel], current: &str) -> OpenPicker {
    let entries = levels
        .iter()
        .map(|level| {
            let facts = if level.as_str() == current {
                "current"
            } else {
                ""
            };
            Entry::new(level.as_str(), facts)
        })
        .collect();
    let picker = Picker::new("Thinking level", "no level matches", entries);
    let selected = levels.iter().position(|l| l.as_str() == current);
    OpenPicker {
        picker: match selected {
            Some(index) => picker.select(index),
            None => picker,
        },
        purpose: Purpose::Thinking(levels.to_vec()),
    }
}

/// `/model [ARG]`: `PROVIDER/ID` selects it; anything else opens the picker filtered by it.
pub fn model(app: &mut App, args: &str) {
    if let Some((provider, id)) = args.split_once('/')
        && !provider.is_empty()
        && !id.is_empty()
        && !args.contains(char::is_whitespace)
    {
        select_model(app, provider, id);
        return;
    }
    let models = match app.session.model_list() {
        Ok(models) => models,
        Err(e) => return error(app, e.to_string()),
    };
    let current = match app.session.state().model {
        ModelState::Selected { model } => Some((model.provider, model.id)),
        ModelState::Unselected => None,
    };
    let current = current.as_ref().map(|(p, i)| (p.as_str(), i.as_str()));
    let mut open = model_picker(&models, current);
    if !args.is_empty() {
        open.picker = open.picker.with_query(args);
    }
    app.picker = Some(open);
}

/// `/thinking [LEVEL]`: a level selects it; anything else opens the picker.
pub fn thinking(app: &mut App, args: &str) {
    if let Some(level) = ThinkingLevel::parse(args) {
        select_thinking(app, level);
        return;
    }
    let levels = app.session.thinking_levels();
    let current = app.session.state().thinking_level;
    let mut open = thinking_picker(&levels, current.as_str());
    if !args.is_empty() {
        open.picker = open.picker.with_query(args);
    }
    app.picker = Some(open);
}

pub fn select_model(app: &mut App, provider: &str, id: &str) {
    match app.session.select_model(provider, id) {
        Ok(_) => app.ask_refresh(),
        Err(e) => error(app, e.to_string()),
    }
}

pub fn select_thinking(app: &mut App, level: ThinkingLevel) {
    match app.session.select_thinking(level, SettingsScope::Global) {
        Ok(_) => app.ask_refresh(),
        Err(e) => error(app, e.to_string()),
    }
}

fn error(app: &mut App, text: String) {
    app.transcript.push(Item::Error(text));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Action;
    use crate::theme::Theme;
    use zi_protocol::state::RpcModel;

    fn model(provider: &str, id: &str, name: &str, configured: bool) -> CatalogModel {
        CatalogModel {
            model: RpcModel {
                provider: provider.into(),
                id: id.into(),
                name: name.into(),
                reasoning: false,
                input: Vec::new(),
                context_window: 1000,
                max_tokens: 100,
            },
            configured,
        }
    }

    fn rows(open: &OpenPicker) -> Vec<String> {
        open.picker
            .lines(&Theme::new(true), 70)
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn configured_models_come_first_with_their_state_and_the_current_one_selected() {
        let models = [
            model("anthropic", "claude-x", "Claude X", false),
            model("mock", "m1", "m1", true),
            model("openai", "gpt-y", "GPT Y", false),
            model("mock", "m2", "Mock Two", true),
            model("openai-codex", "gpt-5.5", "GPT-5.5 (ChatGPT)", false),
        ];
        let open = model_picker(&models, Some(("mock", "m2")));
        assert_eq!(
            rows(&open),
            [
                "filter: ",
                "  mock/m1                                                   configured",
                "› mock/m2                              Mock Two · configured · current",
                "  anthropic/claude-x                Claude X · not configured — no key",
                "  openai/gpt-y                         GPT Y · not configured — no key",
                "  openai-codex/gpt-5.5      GPT-5.5 (ChatGPT) · not signed in — /login",
            ]
        );
    }

    #[test]
    fn typing_filters_by_reference_or_name_and_enter_names_the_model() {
        let models = [
            model("anthropic", "claude-x", "Claude X", false),
            model("mock", "m2", "Mock Two", true),
        ];
        let mut open = model_picker(&models, None);
        for c in "two".chars() {
            open.picker.key(Action::Insert(c));
        }
        let chosen = open.picker.key(Action::Submit).flatten();
        let Purpose::Model(refs) = &open.purpose else {
            panic!("a model picker");
        };
        assert_eq!(
            chosen.map(|i| refs[i].clone()),
            Some(("mock".to_string(), "m2".to_string()))
        );
    }

    #[test]
    fn the_thinking_picker_lists_the_levels_with_the_current_one_selected() {
        let levels = [ThinkingLevel::Off, ThinkingLevel::Low, ThinkingLevel::High];
        let mut open = thinking_picker(&levels, "low");
        assert!(rows(&open)[2].starts_with("› low"), "{:?}", rows(&open));
        open.picker.key(Action::Down);
        let chosen = open.picker.key(Action::Submit).flatten();
        assert_eq!(chosen, Some(2));
    }
}
