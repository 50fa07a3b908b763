//! Byte bounds of tool texts and details (docs/delegation.md#tools).

use serde_json::{Value, json};

use crate::error::SubagentError;
use crate::limits::{DETAILS_AGENTS_MAX_BYTES, clip};
use crate::supervisor::Snapshot;

fn encoded_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |b| b.len())
}

/// Which completion field a clip touches.
#[derive(Clone, Copy)]
enum Field {
    Text,
    Reason,
    Error,
}

fn field_len(snapshot: &Snapshot, field: Field) -> usize {
    let Some(completion) = &snapshot.completion else {
        return 0;
    };
    match field {
        Field::Text => completion.text.len(),
        Field::Reason => completion.reason.map_or(0, str::len),
        Field::Error => completion.error.as_ref().map_or(0, String::len),
    }
}

/// Clips `field` of `snapshot` to `keep` bytes; returns the bytes removed.
fn clip_field(snapshot: &mut Snapshot, field: Field, keep: usize) -> u64 {
    let Some(completion) = snapshot.completion.as_mut() else {
        return 0;
    };
    let removed = match field {
        Field::Text => {
            let kept = clip(&completion.text, keep).len();
            let removed = completion.text.len() - kept;
            completion.text.truncate(kept);
            removed
        }
        // Failure codes are fixed words: clipping one would break the known set.
        Field::Reason => 0,
        Field::Error => match completion.error.as_mut() {
            Some(error) => {
                let kept = clip(error, keep).len();
                let removed = error.len() - kept;
                error.truncate(kept);
                removed
            }
            None => 0,
        },
    } as u64;
    if removed > 0 {
        completion.omitted_bytes += removed;
        completion.truncated = true;
    }
    removed
}

const FIELDS: [Field; 3] = [Field::Text, Field::Reason, Field::Error];

/// The completion projections of wait/interrupt/close texts, clipped to `max` bytes by
/// repeatedly cutting the single largest field by the excess. `build` makes the whole result
/// from the projections and the top-level `omitted_bytes`.
pub fn clipped_text(
    snapshots: &[Snapshot],
    max: usize,
    build: impl Fn(Vec<Value>, u64) -> Value,
) -> Result<String, SubagentError> {
    let mut snapshots: Vec<Snapshot> = snapshots.to_vec();
    let mut omitted: u64 = snapshots
        .iter()
        .filter_map(|s| s.completion.as_ref())
        .map(|c| c.omitted_bytes)
        .sum();
    loop {
        let value = build(
            snapshots.iter().map(Snapshot::text_projection).collect(),
            omitted,
        );
        let text = value.to_string();
        if text.len() <= max {
            return Ok(text);
        }
        let excess = text.len() - max;
        let largest = snapshots
            .iter()
            .enumerate()
            .flat_map(|(i, s)| FIELDS.iter().map(move |f| (i, *f, field_len(s, *f))))
            .filter(|(_, f, len)| *len > 0 && !matches!(f, Field::Reason))
            .max_by_key(|(_, _, len)| *len);
        let Some((index, field, len)) = largest else {
            return Err(SubagentError::WaitMetadata(max));
        };
        omitted += clip_field(&mut snapshots[index], field, len.saturating_sub(excess));
    }
}

/// An `AgentDetails` list bounded to 16 KiB: every text/error field clipped to the largest
/// common limit that fits, then the longest tasks, else the reference's error.
pub fn clipped_agents(snapshots: &[Snapshot]) -> Result<Vec<Value>, SubagentError> {
    let encode = |list: &[Snapshot]| -> Vec<Value> { list.iter().map(Snapshot::details).collect() };
    let fits =
        |list: &[Snapshot]| encoded_len(&Value::Array(encode(list))) <= DETAILS_AGENTS_MAX_BYTES;
    if fits(snapshots) {
        return Ok(encode(snapshots));
    }
    let with_limit = |limit: usize| -> Vec<Snapshot> {
        let mut list = snapshots.to_vec();
        for snapshot in &mut list {
            for field in [Field::Text, Field::Error] {
                if field_len(snapshot, field) > limit {
                    clip_field(snapshot, field, limit);
                }
            }
        }
        list
    };
    let longest = snapshots
        .iter()
        .flat_map(|s| [field_len(s, Field::Text), field_len(s, Field::Error)])
        .max()
        .unwrap_or(0);
    let (mut low, mut high) = (0usize, longest);
    while low < high {
        let middle = (low + high).div_ceil(2);
        if fits(&with_limit(middle)) {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    let mut list = with_limit(low);
    while !fits(&list) {
        let longest_task = list
            .iter_mut()
            .filter(|s| s.task.as_ref().is_some_and(|t| !t.is_empty()))
            .max_by_key(|s| s.task.as_ref().map_or(0, String::len));
        let Some(snapshot) = longest_task else {
            return Err(SubagentError::DetailsMetadata);
        };
        snapshot.task = None;
    }
    Ok(encode(&list))
}

/// `list_subagent_profiles` text: cut the longest description by the excess until it fits.
pub fn clipped_profiles(
    profiles: &[(String, String)],
    max: usize,
) -> Result<(Vec<(String, String)>, u64), SubagentError> {
    let mut profiles = profiles.to_vec();
    let mut omitted = 0u64;
    loop {
        let text = profiles_text(&profiles, omitted);
        if text.len() <= max {
            return Ok((profiles, omitted));
        }
        let excess = text.len() - max;
        let Some(longest) = profiles
            .iter_mut()
            .filter(|(_, d)| !d.is_empty())
            .max_by_key(|(_, d)| d.len())
        else {
            return Err(SubagentError::ProfileMetadata(max));
        };
        let keep = clip(&longest.1, longest.1.len().saturating_sub(excess)).len();
        omitted += (longest.1.len() - keep) as u64;
        longest.1.truncate(keep);
    }
}

pub fn profiles_text(profiles: &[(String, String)], omitted: u64) -> String {
    json!({
        "profiles": profiles
            .iter()
            .map(|(name, description)| json!({"name": name, "description": description}))
            .collect::<Vec<_>>(),
        "omitted_bytes": omitted,
    })
    .to_string()
}
