//! MCP prompts: the bootstrap interview (`bootstrap_interview`, in English
//! or Chinese), a structured conversation an agent walks through with the
//! owner to build a profile: identity, work, people, preferences and
//! routines. The prompt tells the agent to store the answers with the
//! `memory_profile` tool (`POST /v1/profile`), which keeps them as pinned
//! (t0) memories tagged `bootstrap`, `profile` and the topic, plus the
//! `profile` category; a second interview updates the answers that changed.
//! The prompt itself reads nothing and writes nothing.

use rmcp::ErrorData as McpError;
use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{Map, Value};

/// The prompt's name.
pub(crate) const BOOTSTRAP_INTERVIEW: &str = "bootstrap_interview";

/// Every prompt.
pub(crate) fn list() -> Vec<Prompt> {
    vec![Prompt::new(
        BOOTSTRAP_INTERVIEW,
        Some(
            "A guided start: interview the owner (identity, work, people, preferences, \
             routines) and store the answers as their pinned profile with memory_profile. \
             In English (language=en, the default) or Chinese (language=zh).",
        ),
        Some(vec![
            PromptArgument::new("language")
                .with_description("en (default) or zh: the language of the interview")
                .with_required(false),
        ]),
    )]
}

/// Which language the interview is held in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    English,
    Chinese,
}

fn language(arguments: Option<&Map<String, Value>>) -> Result<Language, McpError> {
    let Some(v) = arguments.and_then(|a| a.get("language")) else {
        return Ok(Language::English);
    };
    match v.as_str().map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("" | "en" | "english") => Ok(Language::English),
        Some("zh" | "zh-cn" | "chinese" | "中文") => Ok(Language::Chinese),
        _ => Err(McpError::invalid_params(
            format!("INVALID_INPUT: language must be en or zh; got {v}"),
            None,
        )),
    }
}

/// One prompt, by name.
pub(crate) fn get(
    name: &str,
    arguments: Option<&Map<String, Value>>,
) -> Result<GetPromptResult, McpError> {
    if name != BOOTSTRAP_INTERVIEW {
        return Err(McpError::invalid_params(
            format!("NOT_FOUND: no prompt {name:?}; see prompts/list"),
            None,
        ));
    }
    let (description, text) = match language(arguments)? {
        Language::English => ("Bootstrap interview (English)", ENGLISH),
        Language::Chinese => ("引导访谈（中文）", CHINESE),
    };
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(description),
    )
}

const ENGLISH: &str = "\
You are starting to work with a new owner and your long-term memory (memory-hub) knows little \
about them yet. Run a short bootstrap interview to build their profile.

Ask about one topic at a time, in this order, with one or two friendly questions each; let the \
owner skip any topic or question, and never press for what they do not want to share:

1. identity: their name, how they like to be addressed, the languages they use, where they live \
   and their time zone.
2. work: their role, employer or field, current projects, and the tools they use every day.
3. people: the people who matter to them (family, friends, colleagues) and who each one is.
4. preferences: likes and dislikes, how they want you to communicate (tone, length, language), \
   and anything you should always or never do.
5. routines: their usual day and week: working hours, regular meetings, habits.

After each topic, repeat back in one or two sentences what you understood and let them correct \
it. Never write down passwords, keys or other credentials, even if offered.

When the interview is done (or the owner wants to stop), call the tool memory_profile once with \
one answer per topic covered: {\"answers\": [{\"topic\": \"identity\", \"text\": \"...\"}, ...]}. \
Write each text as a few self-contained sentences in the third person (\"The owner is called \
Dana and prefers to be addressed as Dana.\"). Topics the owner skipped are left out. Running the \
interview again later updates the answers that changed; it never duplicates them.";

const CHINESE: &str = "\
你刚开始为一位新的主人工作，你的长期记忆（memory-hub）对他还知之甚少。请进行一次简短的引导访谈，建立他的个人档案。

按下面的顺序一次只问一个主题，每个主题问一两个友好的问题；主人可以跳过任何主题或问题，不要追问他不想分享的内容：

1. identity（身份）：姓名、希望怎样称呼、使用的语言、住在哪里、所在时区。
2. work（工作）：职位、单位或行业、正在进行的项目、每天使用的工具。
3. people（人际）：对他重要的人（家人、朋友、同事），以及每个人是谁。
4. preferences（偏好）：喜欢和不喜欢的东西、希望你怎样沟通（语气、长短、语言）、你应该总是做或绝不做的事。
5. routines（日常）：平常的一天和一周：工作时间、固定的会议、习惯。

每个主题结束后，用一两句话复述你的理解，让主人纠正。即使主人主动提供，也绝不要记录密码、密钥或其他凭据。

访谈结束（或主人想停下）时，调用一次工具 memory_profile，每个谈到的主题一条答案：\
{\"answers\": [{\"topic\": \"identity\", \"text\": \"……\"}, ...]}。topic 用上面括号前的英文词；\
每条 text 用几句完整、独立的第三人称句子写（“主人叫王芳，希望被称为芳姐。”）。主人跳过的主题不写。\
以后再做一次访谈，只会更新有变化的答案，不会重复记录。";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_languages_and_refusals() {
        let en = get(BOOTSTRAP_INTERVIEW, None).unwrap();
        let text = |r: &GetPromptResult| {
            r.messages[0]
                .content
                .as_text()
                .map(|t| t.text.clone())
                .unwrap()
        };
        assert!(text(&en).contains("memory_profile") && text(&en).contains("routines"));
        let mut args = Map::new();
        args.insert("language".into(), Value::String("zh".into()));
        let zh = get(BOOTSTRAP_INTERVIEW, Some(&args)).unwrap();
        assert!(text(&zh).contains("引导访谈") && text(&zh).contains("memory_profile"));
        args.insert("language".into(), Value::String("fr".into()));
        assert!(get(BOOTSTRAP_INTERVIEW, Some(&args)).is_err());
        assert!(get("nope", None).is_err());
    }
}
